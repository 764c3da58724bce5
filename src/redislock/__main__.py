from redislock.cli import main

raise SystemExit(main())
