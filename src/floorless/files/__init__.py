"""Files people upload: release and issue attachments, and Git LFS objects, kept by the
SHA-256 of their bytes in one store (``store.py``); the attachments' records
(``attachments.py``)."""
