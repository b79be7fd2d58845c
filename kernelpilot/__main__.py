from kernelpilot.cli import main

raise SystemExit(main())
