"""JSON-RPC as this server speaks it, below every feature: the JSON of its messages, its
errors, the era's shape of a result, what a request carries (its caller and context), and
the requests a call makes of its client midway."""
