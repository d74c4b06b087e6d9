# A marketplace order whose platform fee is a fixed 1.50 plus 10% of the
# rest: a split nested in a split (new in 1.1). The fixed fee is capped by
# the price; the percent is taken from what is left, rounded as Numscript
# rounds, and the seller keeps the remainder.
pact "marketplace.nested_fee" version "1.0.0"

currency EUR scale 2

role buyer
role seller
clock scheduler

param price: money between 5.00 and 2000.00
param fee: money = 1.50
param commission: percent = 10%

account world    "world" external
account escrow   "escrow:{agreement}"
account platform "platform:fees"
account seller   "sellers:{seller}:payable"

state placed initial
state paid
state settled final
state cancelled final

clause "1" transition pay: placed -> paid {
  by buyer
  transfer price from world to escrow
}

clause "2" transition cancel: placed -> cancelled {
  by buyer
}

clause "3" transition settle: paid -> settled {
  by buyer, scheduler
  transfer price from escrow {
    fee to platform
    remaining to {
      commission to platform
      remaining to seller
    }
  }
}

clause "4.1" invariant escrow_empty_when_final: final implies balance(escrow) == 0
clause "4.2" invariant seller_paid_on_settle: reached(settled) implies balance(seller) > 0
clause "4.3" invariant platform_fee_bounded: balance(platform) <= fee + price / 10 + 0.01
