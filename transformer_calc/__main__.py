from transformer_calc._entry import main

main()
