"""rheosampling: exact reference, lossless-verification suite and (soon) fastpath for RheoSampling.

``rheo.reference`` is the exact engine (docs/spec.md §1-§7); ``rheo.casefile`` reads case
files (docs/spec.md §8); ``rheo.cli`` is the ``rheo`` command.
"""
__version__ = "0.1.0"
