from feedctl.cli import main

main()
