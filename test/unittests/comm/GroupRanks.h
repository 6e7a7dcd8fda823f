//===- GroupRanks.h - Where a group's members are, for the comm tests -----===//
//
// What the communicator tests expect of a group: the world rank of each of
// its members, computed here independently of the communicators under test.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TEST_UNITTESTS_COMM_GROUPRANKS_H
#define PCC_TEST_UNITTESTS_COMM_GROUPRANKS_H

#include "pccrt/Comm.h"

#include <cstdint>
#include <vector>

namespace pcc_test {

/// The world rank of the member at \p position of \p c's group over the mesh
/// axes \p axes: this rank's coordinates, with those of the group's axes
/// replaced by \p position's digits (the last axis varying fastest).
inline int memberRank(const pccrt::Communicator &c, uint32_t axes,
                      int64_t position) {
  std::vector<int64_t> coords;
  for (size_t a = 0; a < c.meshShape().size(); ++a)
    coords.push_back(c.coordinate(a));
  for (size_t a = c.meshShape().size(); a-- > 0;)
    if (axes & (1u << a)) {
      coords[a] = position % c.meshShape()[a];
      position /= c.meshShape()[a];
    }
  int64_t rank = 0;
  for (size_t a = 0; a < coords.size(); ++a)
    rank = rank * c.meshShape()[a] + coords[a];
  return int(rank);
}

} // namespace pcc_test

#endif // PCC_TEST_UNITTESTS_COMM_GROUPRANKS_H
