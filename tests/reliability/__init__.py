"""Reliability and security tests: faults, bad input, TLS, ACL and secrets (README, Security)."""
