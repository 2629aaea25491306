[[["forward", 1410], ["backward", 1305], ["forward", 1200], ["backward", 990]], [["forward", 885], ["backward", 780], ["forward", 885], ["backward", 780]]]
