"""Webhooks: their settings, the delivery queue and log, the sending."""
