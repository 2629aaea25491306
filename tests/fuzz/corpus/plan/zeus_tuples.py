[
[('forward', 1410), ('forward', 1395), ('backward', 1380), ('backward', 1395)],
[('forward', 1380), ('backward', 1380), ('forward', 1365), ('backward', 1365)],
]
# Iteration 7 cost change: -0.25
