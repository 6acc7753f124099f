"""The ground floor every layer imports: errors, limits, backoff, redact, api_roles."""
