import sys

from evals.realmodel.run import main

sys.exit(main())
