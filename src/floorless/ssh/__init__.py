"""git over SSH: the built-in server of ``floorless serve`` (``server.py``), the command
OpenSSH's own server runs instead (``relay.py``), and the session both serve (``session.py``):
a person's key or a repository's deploy key signs in, and one git process serves the clone,
fetch or push, under the same access and with the same effects as over HTTP."""
