from deploytool.cli import main

# Guarded: the conversion worker is started with multiprocessing's "spawn",
# which imports this module again in the child (as __mp_main__).
if __name__ == "__main__":
    raise SystemExit(main())
