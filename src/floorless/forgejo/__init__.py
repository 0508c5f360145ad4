"""The wire format: every URL the forge emits and the JSON shapes of Forgejo's API and webhooks."""
