"""Validation of a definition: each family of checks, the graph's paths they use, and problems
located and, where possible, fixed (`all_checks` runs them all)."""
