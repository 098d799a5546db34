"""Push notifications: webhook configs, the SSRF guard and the sender."""
