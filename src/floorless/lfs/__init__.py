"""Git LFS: the objects each repository holds (``objects.py``), pointer files (``pointers.py``)
and the locks people take on files (``locks.py``). The HTTP protocol is the web layer's
(``web/views/lfs.py``); the bytes are the content store's (``files/store.py``)."""
