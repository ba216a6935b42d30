"""The counterexample corpus (one shrunk case per negative control), packaged as rheo.cases."""
