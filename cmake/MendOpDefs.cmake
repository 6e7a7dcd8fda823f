# Mends the op definitions that mlir-tblgen 22 generates for a dialect
# without properties (usePropertiesForAttributes = 0): its checks of an
# AttrSizedOperandSegments op's segment sizes put a stray quote before the
# message's text,
#   emitError(loc, "'graph.attention' op "'operandSegmentSizes' attribute ...
#   emitOpError(""'operandSegmentSizes' attribute ...
# which does not compile. The stray quote is dropped; where the generator
# does not write it (a fixed mlir-tblgen) nothing matches and the file is
# copied as it is.
#
#   cmake -DIN=GraphOps.cpp.inc -DOUT=GraphOpsMended.cpp.inc -P MendOpDefs.cmake
file(READ "${IN}" text)
set(message "'operandSegmentSizes' attribute for specifying")
string(REPLACE " op \"${message}" " op ${message}" text "${text}")
string(REPLACE "(\"\"${message}" "(\"${message}" text "${text}")
file(WRITE "${OUT}" "${text}")
