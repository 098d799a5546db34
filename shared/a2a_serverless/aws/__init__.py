"""AWS adapters of core's interfaces: Step Functions (the executor), KMS (card signing),
API Gateway usage plans (API keys' throttling). wiring builds them; core never imports them."""
