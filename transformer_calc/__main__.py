from transformer_calc.cli import main

main()
