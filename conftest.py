"""Shared pytest set-up: Hypothesis profiles (see rheo/hypothesis_profiles.py)."""
from rheo.hypothesis_profiles import register

register()
