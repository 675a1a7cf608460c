"""Search quality: natural-language requests an agent sends, and the specs they should find.

Each query lists the spec(s) a workflow author would pick; all of them must be in the top 3.
The bar is 90% of the queries; the misses are printed so a regression is easy to see.
"""

QUERIES: list[tuple[str, list[str]]] = [
    ("notify my team on Slack when a form is submitted", ["EXTERNAL_ACTION/SLACK", "TRIGGER/FORM"]),
    ("remember earlier conversation turns", ["MEMORY/CONVERSATION_BUFFER"]),
    ("send an email", ["EXTERNAL_ACTION/EMAIL"]),
    ("send email through my gmail account", ["EXTERNAL_ACTION/GMAIL"]),
    ("send a message from outlook", ["EXTERNAL_ACTION/OUTLOOK"]),
    ("run the workflow every morning at 9", ["TRIGGER/CRON"]),
    ("start when someone posts to a webhook url", ["TRIGGER/WEBHOOK"]),
    ("start the workflow by hand with a button", ["TRIGGER/MANUAL"]),
    ("when a new issue is opened on github", ["TRIGGER/GITHUB"]),
    ("create a github issue", ["EXTERNAL_ACTION/GITHUB"]),
    ("ask a manager to approve a refund in slack", ["HUMAN_IN_THE_LOOP/SLACK_INTERACTION"]),
    ("get approval by email before continuing", ["HUMAN_IN_THE_LOOP/GMAIL_INTERACTION"]),
    ("wait for a human to review the draft in the app", ["HUMAN_IN_THE_LOOP/MANUAL_REVIEW"]),
    ("summarize a document with chatgpt", ["AI_AGENT/OPENAI_CHATGPT"]),
    ("use claude to answer questions", ["AI_AGENT/ANTHROPIC_CLAUDE"]),
    ("gemini model", ["AI_AGENT/GOOGLE_GEMINI"]),
    ("call a rest api", ["ACTION/HTTP_REQUEST"]),
    ("make an http request", ["ACTION/HTTP_REQUEST"]),
    ("run some python code", ["ACTION/RUN_CODE"]),
    ("query a postgres database with sql", ["ACTION/DATABASE_OPERATION"]),
    ("read a csv file", ["ACTION/FILE_OPERATION"]),
    ("extract text from an image of a receipt", ["ACTION/PARSE_IMAGE"]),
    ("search the web for news", ["ACTION/WEB_SEARCH"]),
    ("scrape a website into markdown", ["EXTERNAL_ACTION/FIRECRAWL"]),
    ("branch on a condition", ["FLOW/IF"]),
    ("loop over each item in a list", ["FLOW/LOOP"]),
    ("combine the results of two branches", ["FLOW/MERGE"]),
    ("pause for ten minutes", ["FLOW/DELAY"]),
    ("sort records by date", ["FLOW/SORT"]),
    ("keep only the items that match a rule", ["FLOW/FILTER"]),
    ("route to different paths based on a value", ["FLOW/SWITCH"]),
    ("store embeddings for semantic search", ["MEMORY/VECTOR_DATABASE"]),
    ("save a value under a key for later runs", ["MEMORY/KEY_VALUE_STORE"]),
    ("keep a running summary of a long chat", ["MEMORY/CONVERSATION_SUMMARY"]),
    ("let the agent create notion pages", ["TOOL/NOTION_MCP_TOOL"]),
    ("give the agent access to my google calendar", ["TOOL/GOOGLE_CALENDAR_MCP_TOOL"]),
    ("create a meeting on google calendar", ["EXTERNAL_ACTION/GOOGLE_CALENDAR"]),
    ("add a card to a trello board", ["EXTERNAL_ACTION/TRELLO"]),
    ("post a message to a discord channel", ["EXTERNAL_ACTION/DISCORD_ACTION"]),
    ("send a telegram message", ["EXTERNAL_ACTION/TELEGRAM_ACTION"]),
    ("send an sms or push alert to the on-call person", ["EXTERNAL_ACTION/NOTIFICATION"]),
    ("start when an email arrives", ["TRIGGER/EMAIL"]),
    ("chat with users", ["TRIGGER/CHAT"]),
]


def top_names(registry, query: str, count: int = 3) -> list[str]:
    from nodespecs.knowledge.service import search_nodes

    results = search_nodes(query, max_results=count, registry=registry)
    return [f"{r['node_type']}/{r['subtype']}" for r in results]


def test_the_query_set_is_large_enough_and_names_real_specs(registry):
    assert len(QUERIES) >= 30
    for _, expected in QUERIES:
        for name in expected:
            node_type, subtype = name.split("/")
            assert subtype in registry.types[node_type], name


def test_expected_specs_rank_in_the_top_three_for_nine_queries_in_ten(registry):
    misses = []
    for query, expected in QUERIES:
        top = top_names(registry, query)
        if not all(name in top for name in expected):
            misses.append(f"{query!r}: expected {expected}, got {top}")
    hit_rate = 1 - len(misses) / len(QUERIES)
    assert hit_rate >= 0.9, f"hit rate {hit_rate:.0%}; misses:\n" + "\n".join(misses)
