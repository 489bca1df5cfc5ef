"""`python -m evals`: run the eval suites (see evals/run.py)."""

from evals.run import main

raise SystemExit(main())
