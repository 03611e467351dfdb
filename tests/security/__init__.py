"""The attack suite: what an attacker would try, on both stores (issue "no way in")."""
