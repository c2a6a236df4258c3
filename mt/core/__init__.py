"""What every stage uses: the user's-mistake error, atomic files, UTF-8 lines, logging, devices, processes,
signals, the run lock, sacreBLEU scores."""
