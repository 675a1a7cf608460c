"""What this server offers besides workflows: its own tools (the catalog's, the builder's, the
run history's), its resources and its prompts."""
