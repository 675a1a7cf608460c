"""The expression languages of a graph: JSONata (on RE2 regexes), JSON Logic for switches, and
what an expression reads from a run's context."""
