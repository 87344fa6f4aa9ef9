from pypto_core.cli import main

raise SystemExit(main())
