from deploytool.cli import main

raise SystemExit(main())
