"""The node knowledge service: the catalog's specs, their format and writes, the in-memory
registry, search, name resolution and what an agent is told of a spec."""
