"""`python -m specdebug.sim [SGLang flags] [sim flags]`: run the simulated SGLang server."""

import sys

if __name__ == "__main__":
    from specdebug.sim.server.sglang.launcher import main

    sys.exit(main(sys.argv[1:]))
