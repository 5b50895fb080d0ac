raise SystemExit('shadowed')
