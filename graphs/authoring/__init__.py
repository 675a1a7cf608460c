"""Writing workflows: saving and validating definitions, drafts and publishing, graph files,
group slugs, rights and the server's limits on what an author may ask."""
