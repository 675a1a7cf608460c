"""Reading the run history: the reviewer pages' and API's queries and shapes, the runs list's
keyset, graph drawings, and seeded history for scale tests."""
