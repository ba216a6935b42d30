"""The benchmarks (``rheo bench ...``): each returns a dict that ``rheo.cli.bench`` renders,
with every ratio measured side by side in one run and every target naming its device.
Speed targets live here, never in timed unit tests."""
