# NOT a planted pair: a probe for the verifier's compensation semantics,
# used by tests/test_planted_bugs.py.
# `ship` captures the card payment (undone by `void_capture` if a later step
# is given up) and books the courier with strategy `once`. When the booking's
# response is lost, the runtime abandons it as "may have occurred" and voids
# the capture, although the booking went through: the parcel ships unpaid.
# `booked_parcels_are_paid` states it; the explorer cannot see it yet because
# `applied(E)` of an effect used only as a compensation reads as 0 (see the
# xfail test). The probe also pins two fixed explorer bugs: a capture voided
# twice (abandon after a fault re-armed a COMPENSATED site), and a capture
# voided on a provider error that an `idempotent` step goes on to retry.
pact "planted.compensation_probe" version "1.0.0"

currency EUR scale 2
default deny

role clerk

param price: money between 1.00 and 300.00
param order_id: text matching "O-[0-9]{1,9}"

account world "world" external
account shop  "shop:revenue"

rule R2 allow

effect capture_payment {
  risk R2
  reversibility compensable
  scopes "payments:capture"
  max_calls 1
  strategy compensate with void_capture
  key order_id, price
  amount price
}

effect void_capture {
  risk R2
  reversibility not_applicable
  scopes "payments:void"
  max_calls 1
  strategy idempotent
  key order_id, price
}

effect book_courier {
  risk R2
  reversibility irreversible
  scopes "courier:book"
  max_calls 1
  strategy once
  key order_id
  amount 0.00                            # the booking itself moves no money
}

state packed initial
state shipped final

clause "1" transition ship: packed -> shipped {
  by clerk
  call capture_payment
  call book_courier
  transfer price from world to shop
}

clause "2" invariant booked_parcels_are_paid:
  applied(book_courier) > 0 implies applied(void_capture) == 0
