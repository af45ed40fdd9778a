from kernelsweep.flows.cli.app import main

main()
