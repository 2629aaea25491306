[[("forward", 1410), ("p2p", 1), ("forward", 1410), ("backward", 1305), ("p2p", 2), ("backward", 1305)], [("forward", 1200), ("backward", 1200), ("p2p", 0), ("forward", 990), ("backward", 990)]]
