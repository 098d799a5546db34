"""Lambda entry point: the code is a2a_serverless.handlers.agent_card."""

from a2a_serverless.handlers.agent_card import create

app, handler = create()
