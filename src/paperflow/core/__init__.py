"""Shared machinery every study stands on: config, atomic I/O + manifests, seeding, progress,
plotting and registries. Nothing here knows about a particular study."""
