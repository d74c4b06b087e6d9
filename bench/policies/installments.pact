# Benchmark model: an agreement that takes a payment as often as the buyer makes one, so its event
# log and evidence chain grow without bound (the verifier's run is bounded: `--allow-incomplete`).
pact "bench.installments" version "1.0.0"
currency EUR scale 2
default deny
role buyer
param price: money between 1.00 and 100.00
rule R2 allow
account world "world" external
account pool "pool:x"
state open initial
state done final
transition pay: open -> open {
  by buyer
  transfer price from world to pool
}
transition close: open -> done {
  by buyer
}
