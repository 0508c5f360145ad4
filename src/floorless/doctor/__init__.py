"""``floorless doctor``: find and explain a forge's latency floor from inside the machine.

The floor DESIGN.md describes comes from where a forge's git children read their config:
each child stats and reads a few files below git's HOME at start-up, and when HOME sits on
network or host-shared storage each of those calls is a round trip. The doctor:

- resolves the directories that matter (git HOME, repositories, data, temporary
  directories) for floorless's own settings or from a Forgejo or Gitea ``app.ini``
  (``appini``);
- names the filesystem under each from the kernel's mount table (``mounts``);
- times the config files' syscalls and ``git rev-parse`` with that HOME against a local one
  (``measure``);
- turns that into findings, an estimate per page, the exact fix and an exit status
  (``diagnose``), shown as text or JSON (``report``).
"""

from floorless.doctor.diagnose import Options, diagnose_floorless, diagnose_forge

__all__ = ["Options", "diagnose_floorless", "diagnose_forge"]
