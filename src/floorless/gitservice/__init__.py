"""git's two services as every transport serves them: who may use which on a repository, and
what a push sets off. HTTP (``web/views/githttp.py``) and SSH (``ssh/``) carry the bytes;
the decisions and the push's effects are here, once."""
