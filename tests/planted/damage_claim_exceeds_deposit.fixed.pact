# FIXED twin of damage_claim_exceeds_deposit.bug.pact: when the assessed
# damage is at least the deposit, the landlord is paid the deposit, which is
# all the escrow holds; the rest of a larger claim is not this agreement's.
pact "planted.damage_claim_exceeds_deposit" version "1.0.1"

currency EUR scale 2

role tenant
role landlord

param deposit: money between 100.00 and 2000.00
param damage: money between 0.00 and 5000.00

account world    "world" external
account escrow   "deposits:{agreement}"
account tenant   "tenants:{tenant}:refunds"
account landlord "landlords:{landlord}:claims"

state open initial
state held
state inspected
state returned final
state settled final
state claimed final

clause "1" transition pay: open -> held {
  by tenant
  transfer deposit from world to escrow
}

clause "2" transition inspect: held -> inspected {
  by landlord
}

clause "3.1" transition return_deposit: inspected -> returned {
  by landlord
  transfer deposit from escrow to tenant
}

clause "3.2" transition settle_damage: inspected -> settled {
  by landlord
  when damage > 0.00 and damage < deposit
  transfer damage from escrow to landlord
  transfer deposit - damage from escrow to tenant
}

clause "3.3" transition claim_full: inspected -> claimed {
  by landlord
  when damage >= deposit
  transfer deposit from escrow to landlord
}

clause "4" invariant escrow_empty_when_final: final implies balance(escrow) == 0
