"""a2a-serverless: an A2A 1.0 agent endpoint on AWS serverless primitives."""

__version__ = "0.1.0"
