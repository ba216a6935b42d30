"""Model integrations (real target and draft models). None yet: they land with the real-model issue."""
