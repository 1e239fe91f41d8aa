"""`python -m deploytool` and the `deploytool` command (`entry`): the command line, with a Ctrl-C that arrives
while its modules are still importing ending as quietly as one during a command (exit 130, no traceback)."""

import sys


def entry() -> int:
    try:
        # imported here, not above: an interruption during the import itself is caught here
        from deploytool.cli import main
    except KeyboardInterrupt:
        print("deploytool: interrupted", file=sys.stderr)
        return 130
    return main()


# Guarded: the conversion worker is started with multiprocessing's "spawn",
# which imports this module again in the child (as __mp_main__).
if __name__ == "__main__":
    raise SystemExit(entry())
