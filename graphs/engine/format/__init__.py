"""The graph YAML format of seed 003: loading it safely, parsing it into definitions, and
writing definitions back."""
